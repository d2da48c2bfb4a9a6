# What `cmake --install` puts under its prefix, and how other projects find
# it. Included by CMakeLists.txt after the targets exist.
#   lib/libremat_<folder>.a       the libraries (static)
#   include/remat/<folder>/*.h    the headers, by folder ("engine/tensor.h")
#   bin/remat                     the command line program
#   lib/cmake/remat/              find_package(remat CONFIG): remat::<folder>
#   lib/pkgconfig/remat.pc        pkg-config --cflags --libs remat
# tests/package/ builds a small program both ways, and through add_subdirectory.
include(CMakePackageConfigHelpers)

# Inside another project (add_subdirectory) its `cmake --install` leaves
# remat out unless asked.
option(REMAT_INSTALL "Install remat's libraries, headers, program and package files" ${PROJECT_IS_TOP_LEVEL})
if(NOT REMAT_INSTALL)
  return()
endif()

set(REMAT_FOLDERS kernels engine ops scheduler nn optim comm data train workloads tasks)
set(remat_targets)
foreach(folder ${REMAT_FOLDERS})
  list(APPEND remat_targets remat_${folder})
endforeach()
set(REMAT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/remat)

install(TARGETS ${remat_targets} remat EXPORT rematTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${REMAT_FOLDERS} DESTINATION ${REMAT_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
install(EXPORT rematTargets NAMESPACE remat:: DESTINATION ${REMAT_INSTALL_CMAKEDIR})

# The config finds what the static libraries link against, as this build did.
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rematConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/rematConfig.cmake
                              INSTALL_DESTINATION ${REMAT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rematConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rematConfig.cmake ${PROJECT_BINARY_DIR}/rematConfigVersion.cmake
        DESTINATION ${REMAT_INSTALL_CMAKEDIR})

# pkg-config: the libraries in link order (tasks first, kernels last), the
# packages they need, and the definitions the headers were built with.
set(REMAT_PC_LIBS "")
foreach(folder tasks workloads train data comm optim nn scheduler ops engine kernels)
  string(APPEND REMAT_PC_LIBS " -lremat_${folder}")
endforeach()
set(REMAT_PC_CFLAGS "")
set(REMAT_PC_EXTRA_LIBS "-fopenmp ${REMAT_BLIS_LIBRARY} ${REMAT_DNNL_LIBRARY}")  # BLIS, oneDNN: the GEMM
if(REMAT_CUDA)
  string(APPEND REMAT_PC_CFLAGS " -DREMAT_HAVE_CUDA=1 -I${CUDAToolkit_INCLUDE_DIRS}")
  string(APPEND REMAT_PC_EXTRA_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcublasLt")
endif()
if(REMAT_HAVE_NCCL)
  string(APPEND REMAT_PC_CFLAGS " -DREMAT_HAVE_NCCL=1 -I${NCCL_INCLUDE_DIR}")
  string(APPEND REMAT_PC_EXTRA_LIBS " ${NCCL_LIBRARY}")
endif()
# The prefix relative to the .pc file, so that `cmake --install --prefix P`
# anywhere gives a file that names P.
file(RELATIVE_PATH REMAT_PC_PREFIX_FROM_PCFILEDIR ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${CMAKE_CURRENT_LIST_DIR}/remat.pc.in ${PROJECT_BINARY_DIR}/remat.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/remat.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
