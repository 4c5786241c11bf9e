# install(): headers, libsyncrep (shared + static), the syncrep command, a
# pkg-config file and a CMake package config for find_package(syncrep).
include(CMakePackageConfigHelpers)

install(DIRECTORY include/syncrep DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS syncrep RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS syncrep_shared syncrep_static EXPORT syncrepTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT syncrepTargets NAMESPACE syncrep::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/syncrep)
configure_package_config_file(cmake/syncrepConfig.cmake.in
  ${PROJECT_BINARY_DIR}/syncrepConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/syncrep)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/syncrepConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/syncrepConfig.cmake
  ${PROJECT_BINARY_DIR}/syncrepConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/syncrep)
set(SR_PC_PRIVATE_LIBS "")
foreach(lib ${SR_GPU_LINK_LIBRARIES})
  string(APPEND SR_PC_PRIVATE_LIBS " ${lib}")
endforeach()
configure_file(cmake/syncrep.pc.in ${PROJECT_BINARY_DIR}/syncrep.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/syncrep.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
