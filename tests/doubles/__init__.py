"""Test doubles: stand-ins for programs that cannot run here (a Kubernetes API server, ...).

Each module says what it imitates and what it leaves out. None is the real thing: a test that
passes against a double shows that pdctl and the real helm binaries speak the protocol as far as
the double implements it, not that a cluster behaves the same.
"""
