// Nothing of its own: it gives the tests' shared precompiled headers (tests/CMakeLists.txt) a
// target to be built in.
