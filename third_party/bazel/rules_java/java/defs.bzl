"""Offline stand-in for rules_java: forwards to Bazel 4.2.3's native Java rules."""

def java_import(**kwargs):
    native.java_import(**kwargs)

def java_runtime(**kwargs):
    native.java_runtime(**kwargs)

def java_toolchain(**kwargs):
    native.java_toolchain(**kwargs)

def java_library(**kwargs):
    native.java_library(**kwargs)

def java_binary(**kwargs):
    native.java_binary(**kwargs)
