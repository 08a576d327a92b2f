# One library per module of src/, linked only to the modules that DESIGN.md's
# module table allows (included by the top-level CMakeLists.txt).
#
# The table (| module | owns | may depend on |) is the one source: the include
# check (scripts/check-module-deps.py) reads it too. Each module is an object
# library; from its objects come
#   tp_<module>        a static library linked (PUBLIC) to the modules it may use:
#                      what the binary, the tests and the benches link;
#   tp_<module>_closed a shared library built with -Wl,--no-undefined against the
#                      _closed libraries of those modules only, so that a call into a
#                      module the table does not allow fails the build at link time,
#                      as an include of it fails the include check. Not built with
#                      TP_SANITIZE: the sanitizers' runtimes are not linked into shared
#                      libraries by clang (the plain build of the same tree checks it).
# tpcore is every module (the command-line front end's tp_cli and all below it).

set(TP_EXTERNAL_LIBS PkgConfig::YAML PkgConfig::JANSSON PkgConfig::SQLITE PkgConfig::UV
    PkgConfig::MHD PkgConfig::LAPACK ${GLPK_LIBRARY} ${CMAKE_DL_LIBS} m)

# TP_MODULE_DEPS_<m> from the table, in the table's order (a module after those it uses).
file(STRINGS ${CMAKE_SOURCE_DIR}/DESIGN.md _tp_design)
set(_tp_in_table OFF)
set(TP_MODULES "")
foreach(_line IN LISTS _tp_design)
  if(_line MATCHES "^\\| module \\| owns \\| may depend on \\|")
    set(_tp_in_table ON)
  elseif(_tp_in_table AND NOT _line MATCHES "^\\|")
    break()
  elseif(_tp_in_table AND _line MATCHES "^\\| ([a-z_]+) \\|.*\\| ([^|]*) \\|$")
    set(_m ${CMAKE_MATCH_1})
    string(REGEX REPLACE "\\(.*" "" _deps "${CMAKE_MATCH_2}")
    string(REGEX MATCHALL "[a-z_]+" _deps "${_deps}")
    list(APPEND TP_MODULES ${_m})
    set(TP_MODULE_DEPS_${_m} ${_deps})
  endif()
endforeach()
if(NOT TP_MODULES)
  message(FATAL_ERROR "DESIGN.md has no module table (| module | owns | may depend on |)")
endif()

foreach(_m IN LISTS TP_MODULES)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${_m}/*.c)
  list(FILTER _srcs EXCLUDE REGEX ".*/src/cli/main\\.c$")
  if(_m STREQUAL "web")
    list(APPEND _srcs ${CMAKE_BINARY_DIR}/web_assets.c)
  endif()
  add_library(tp_${_m}_objects OBJECT ${_srcs})
  set_target_properties(tp_${_m}_objects PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(tp_${_m}_objects PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_include_directories(tp_${_m}_objects PRIVATE ${GLPK_INCLUDE_DIR})
  target_link_libraries(tp_${_m}_objects PUBLIC ${TP_EXTERNAL_LIBS})
  add_library(tp_${_m} STATIC $<TARGET_OBJECTS:tp_${_m}_objects>)
  target_include_directories(tp_${_m} PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(tp_${_m} PUBLIC ${TP_EXTERNAL_LIBS})
  if(NOT TP_SANITIZE)
    add_library(tp_${_m}_closed SHARED $<TARGET_OBJECTS:tp_${_m}_objects>)
    target_link_options(tp_${_m}_closed PRIVATE -Wl,--no-undefined)
    target_link_libraries(tp_${_m}_closed PRIVATE ${TP_EXTERNAL_LIBS})
  endif()
  foreach(_d IN LISTS TP_MODULE_DEPS_${_m})
    if(NOT TARGET tp_${_d})
      message(FATAL_ERROR "DESIGN.md: module ${_m} may depend on ${_d}, which is not listed above it")
    endif()
    target_link_libraries(tp_${_m} PUBLIC tp_${_d})
    if(NOT TP_SANITIZE)
      target_link_libraries(tp_${_m}_closed PRIVATE tp_${_d}_closed)
    endif()
  endforeach()
endforeach()
# The source tree's data/, the last place tp__workload_default_path looks
# (so that a build tree's binary finds data/workloads/sp.yaml).
set_source_files_properties(${CMAKE_SOURCE_DIR}/src/sim/workload.c TARGET_DIRECTORY tp_sim_objects
  PROPERTIES COMPILE_DEFINITIONS TP_SOURCE_DATA_DIR="${CMAKE_SOURCE_DIR}/data")

add_library(tpcore INTERFACE)
target_link_libraries(tpcore INTERFACE tp_cli)
