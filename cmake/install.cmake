# Installation and the Debian package (included by the top-level CMakeLists.txt).
#
#   <prefix>/bin/tunepack
#   <prefix>/include/tunepack/report.h
#   <prefix>/<TP_PYTHON_DIR>/tunepack_report.py   (see below)
#   <prefix>/<TP_PYTHON_DIR>/tunepack.py          the Python front end, beside it
#   <prefix>/share/man/man1/tunepack.1, tunepack-<verb>.1
#   <prefix>/share/man/man5/tunepack-experiment.5        the experiment file
#   <prefix>/share/doc/tunepack/README.md, docs/ (with docs/img/), examples/
#   <prefix>/share/bash-completion/completions/tunepack
#   <prefix>/share/tunepack/workloads/sp.yaml, README.md
#   <prefix>/lib/tunepack/examples/mlp_train
#   <prefix>/share/tunepack/examples/mlp/experiment.yaml  (command: the installed mlp_train)
#
# Paths that depend on the prefix are decided when installing, not when
# configuring, so that `cmake --install build --prefix /usr` is right for a
# tree configured for /usr/local.
include(GNUInstallDirs)

install(TARGETS tunepack RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/tunepack/report.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tunepack)
foreach(_section 1 5)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section}
          FILES_MATCHING PATTERN "*.${_section}")
endforeach()
# The documentation the man pages point to: /usr/share/doc/tunepack/ in the package. The
# examples are the sources' (their paths are the source tree's; the MLP one, rewritten for
# the installed trainer, is under share/tunepack/examples/ too).
set(TP_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/tunepack)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${TP_DOC_DIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs DESTINATION ${TP_DOC_DIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples DESTINATION ${TP_DOC_DIR}
        PATTERN CMakeLists.txt EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/completion/tunepack.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME tunepack)
install(FILES ${CMAKE_SOURCE_DIR}/data/workloads/sp.yaml ${CMAKE_SOURCE_DIR}/data/workloads/README.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tunepack/workloads)
install(TARGETS mlp_train RUNTIME DESTINATION lib/tunepack/examples)

# The Python helper goes where Debian's /usr/bin/python3 imports from without
# PYTHONPATH: lib/python3/dist-packages under /usr (Debian's own modules),
# lib/python3.X/dist-packages under any other prefix (as /usr/local), X being
# the minor version of the system python3 (else of the python3 found).
set(TP_PYTHON_DIR "" CACHE STRING
    "where tunepack_report.py and tunepack.py go, relative to the prefix (empty: decided at install time)")
set(_tp_py ${PYTHON3})
if(EXISTS /usr/bin/python3)
  set(_tp_py /usr/bin/python3)
endif()
execute_process(COMMAND ${_tp_py} -c "import sys; print('%d.%d' % sys.version_info[:2])"
                OUTPUT_VARIABLE TP_PYTHON_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT TP_PYTHON_VERSION)
  set(TP_PYTHON_VERSION 3)
endif()
install(CODE "
  set(_dir \"${TP_PYTHON_DIR}\")
  if(NOT _dir)
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
      set(_dir lib/python3/dist-packages)
    else()
      set(_dir lib/python${TP_PYTHON_VERSION}/dist-packages)
    endif()
  endif()
  file(INSTALL \"${CMAKE_SOURCE_DIR}/python/tunepack_report.py\"
               \"${CMAKE_SOURCE_DIR}/python/tunepack.py\"
       DESTINATION \"\${CMAKE_INSTALL_PREFIX}/\${_dir}\")
")

# The example experiment, its command pointing at the installed trainer.
install(CODE "
  file(READ \"${CMAKE_SOURCE_DIR}/examples/mlp/experiment.yaml\" _exp)
  string(REPLACE \"./build/examples/mlp_train\" \"\${CMAKE_INSTALL_PREFIX}/lib/tunepack/examples/mlp_train\" _exp \"\${_exp}\")
  file(WRITE \"${CMAKE_BINARY_DIR}/installed/experiment.yaml\" \"\${_exp}\")
  file(INSTALL \"${CMAKE_BINARY_DIR}/installed/experiment.yaml\"
       DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/tunepack/examples/mlp\")
")

# cpack -G DEB: tunepack_<version>_<arch>.deb, installing under /usr.
set(CPACK_PACKAGE_NAME tunepack)
set(CPACK_PACKAGE_VENDOR "tunepack")
set(CPACK_PACKAGE_CONTACT "tunepack maintainers <tunepack@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "hyperparameter tuning that packs trials onto GPUs")
set(CPACK_PACKAGE_DESCRIPTION
    "tunepack runs the trials of a hyperparameter search as processes, journals every event in SQLite so that a killed run resumes, packs several trials onto each GPU when they fit, and simulates and plans GPU clusters for a workload.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Install with DESTDIR and the prefix /usr (not a temporary prefix), so that
# the install-time paths above are the package's.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
# Shared-library dependencies from dpkg-shlibdeps where it exists (dpkg-dev);
# otherwise Debian 12's names, listed.
find_program(TP_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(TP_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "libc6, libyaml-0-2, libjansson4, libsqlite3-0, libuv1, libglpk40, liblapack3, libblas3, python3")
endif()
include(CPack)
