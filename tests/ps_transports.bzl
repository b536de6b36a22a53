"""One PS shell test on each of the PS's transports (issue 35)."""

def ps_transport_sh_tests(name, **kwargs):
    """Defines NAME_test (gRPC's data plane) and NAME_tcp_test (TCP's, the default).

    Each runs the same script with RINGSIDE_TEST_PS_TRANSPORT set, which
    tests/test_lib.sh turns into --ps_transport=grpc or tcp on every PS job it starts.
    A part that starts no PS job (DDP, single) is the same on both: it runs in
    NAME_test only (test_lib.sh's not_ps_part). (NAME_test kept its name from when
    gRPC was the default.)

    Args:
      name: the script's stem (tests/NAME_test.sh).
      **kwargs: sh_test's other attributes (size, args, data, deps, tags), both alike.
    """
    srcs = [name + "_test.sh"]
    native.sh_test(
        name = name + "_test",
        srcs = srcs,
        env = {"RINGSIDE_TEST_PS_TRANSPORT": "grpc"},
        **kwargs
    )
    native.sh_test(
        name = name + "_tcp_test",
        srcs = srcs,
        env = {"RINGSIDE_TEST_PS_TRANSPORT": "tcp"},
        **kwargs
    )
