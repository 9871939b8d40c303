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
