# The Python module `remat` (python/): the nanobind extension remat._remat
# over remat_tasks and remat_workloads, and the package's .py files beside it in
# build/python/remat/ (PYTHONPATH=build/python). Built where nanobind is:
# under scikit-build-core (`pip install .`, pyproject.toml), or with the
# environment scripts/setup_py.sh makes in build-py/. Included by
# CMakeLists.txt after the libraries (which are position-independent for it).
if(SKBUILD)
  find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
else()
  set(Python_EXECUTABLE ${REMAT_PYTHON_VENV}/bin/python)
  find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
endif()
execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                OUTPUT_VARIABLE nanobind_ROOT COMMAND_ERROR_IS_FATAL ANY)
find_package(nanobind CONFIG REQUIRED)
message(STATUS "remat: the Python module for ${Python_EXECUTABLE} (Python ${Python_VERSION}, nanobind ${nanobind_VERSION})")

nanobind_add_module(_remat NB_STATIC ${CMAKE_CURRENT_LIST_DIR}/../python/module.cpp
                    ${CMAKE_CURRENT_LIST_DIR}/../python/tensor.cpp ${CMAKE_CURRENT_LIST_DIR}/../python/nn.cpp
                    ${CMAKE_CURRENT_LIST_DIR}/../python/scheduler.cpp ${CMAKE_CURRENT_LIST_DIR}/../python/plans.cpp
                    ${CMAKE_CURRENT_LIST_DIR}/../python/train.cpp ${CMAKE_CURRENT_LIST_DIR}/../python/accelerate.cpp)
target_link_libraries(_remat PRIVATE remat_tasks remat_workloads)
set(remat_python_dir ${PROJECT_BINARY_DIR}/python/remat)
set_target_properties(_remat PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${remat_python_dir})
file(GLOB remat_python_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/remat/*.py)
foreach(source ${remat_python_sources})
  get_filename_component(name ${source} NAME)
  configure_file(${source} ${remat_python_dir}/${name} COPYONLY)
endforeach()
# The wheel (pyproject.toml installs component python only).
install(TARGETS _remat LIBRARY DESTINATION remat COMPONENT python)
