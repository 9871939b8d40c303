# octet's MLIR libraries and ODS files, through MLIR's own CMake functions.

# A static MLIR library: add_mlir_library, or add_mlir_dialect_library with
# DIALECT, left out of libMLIR and of MLIR's install and export sets (octet
# installs none of its libraries), with LLVM's and MLIR's headers.
#
#   octet_mlir_library(NAME [DIALECT] SOURCES...
#     [DEPENDS tablegen targets...]
#     [LINK_LIBS octet libraries...]
#     [MLIR_LIBS upstream MLIR libraries...])
#
# Upstream libraries go through mlir_target_link_libraries, which links
# libMLIR.so in their place (MLIR_LINK_MLIR_DYLIB); octet's own go through
# plain LINK_LIBS, so that their generated headers are built first.
# PARTIAL_SOURCES_INTENDED: octet's directories hold several libraries.
function(octet_mlir_library name)
  cmake_parse_arguments(ARG "DIALECT" "" "DEPENDS;LINK_LIBS;MLIR_LIBS" ${ARGN})
  if(ARG_DIALECT)
    set(add_library_function add_mlir_dialect_library)
  else()
    set(add_library_function add_mlir_library)
  endif()
  cmake_language(CALL ${add_library_function} ${name}
    ${ARG_UNPARSED_ARGUMENTS}
    PARTIAL_SOURCES_INTENDED EXCLUDE_FROM_LIBMLIR DISABLE_INSTALL
    DEPENDS ${ARG_DEPENDS}
    LINK_LIBS PUBLIC OctetMLIRHeaders ${ARG_LINK_LIBS})
  if(ARG_MLIR_LIBS)
    mlir_target_link_libraries(${name} PUBLIC ${ARG_MLIR_LIBS})
  endif()
endfunction()

# mlir_tablegen with the include paths octet's ODS files use (MLIR's .td
# files and octet's own, "dialects/graph/GraphDialect.td"), which tablegen
# would otherwise take from directory-wide include_directories.
function(octet_tablegen ofn)
  mlir_tablegen(${ofn} ${ARGN}
    EXTRA_INCLUDES ${MLIR_INCLUDE_DIRS} ${PROJECT_SOURCE_DIR})
  set(TABLEGEN_OUTPUT ${TABLEGEN_OUTPUT} PARENT_SCOPE)
endfunction()

# One of octet's dialects from its ODS file ${prefix}Ops.td: the dialect's
# and the ops' declarations and definitions (${prefix}Dialect.h.inc,
# ${prefix}Dialect.cpp.inc, ${prefix}Ops.h.inc, ${prefix}Ops.cpp.inc) with
# whatever the caller generated before it, as Octet${prefix}IncGen, and the
# dialect library Octet${prefix} from ${prefix}Dialect.cpp.
#
#   octet_dialect(PREFIX NAMESPACE [MLIR_LIBS upstream MLIR libraries...])
#
# A macro: the generated files accumulate in the caller's TABLEGEN_OUTPUT.
macro(octet_dialect prefix namespace)
  cmake_parse_arguments(_octet_dialect "" "" "MLIR_LIBS" ${ARGN})
  set(LLVM_TARGET_DEFINITIONS ${prefix}Ops.td)
  octet_tablegen(${prefix}Dialect.h.inc -gen-dialect-decls
    -dialect=${namespace})
  octet_tablegen(${prefix}Dialect.cpp.inc -gen-dialect-defs
    -dialect=${namespace})
  octet_tablegen(${prefix}Ops.h.inc -gen-op-decls)
  octet_tablegen(${prefix}Ops.cpp.inc -gen-op-defs)
  add_mlir_dialect_tablegen_target(Octet${prefix}IncGen)
  octet_mlir_library(Octet${prefix} DIALECT ${prefix}Dialect.cpp
    DEPENDS Octet${prefix}IncGen
    LINK_LIBS OctetDialectCommon
    MLIR_LIBS ${_octet_dialect_MLIR_LIBS})
endmacro()
