# Empties the directory DIR (removes it and creates it again): run by the `<test>.fresh-tmp`
# fixture before every C test with a TMP directory, so a test never sees files of an earlier run
# (saves over an existing model write their weight files under alternate names).
if(NOT DIR)
  message(FATAL_ERROR "FreshDir.cmake: DIR is not set")
endif()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
