// Every differentiable op, for code that uses many of them.
#pragma once

#include "engine/autograd.h"
#include "engine/factory.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/mask.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/unary.h"
