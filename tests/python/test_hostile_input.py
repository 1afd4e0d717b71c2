"""The hostile-input suite: every probe of hostile_probes.py, each in its own child
process under a time and an address-space limit (run two at a time, once per session), must
end as its table says — the library's error naming the op and the argument, or a correct
result — never a crash, an exit, a hang, exhausted memory or another exception."""
import pytest

import hostile_probes

PROBES = hostile_probes.probes()


@pytest.fixture(scope="module")
def outcomes():
    return {o.probe.name: o for o in hostile_probes.run_all()}


def test_probe_names_are_unique():
    assert len({p.name for p in PROBES}) == len(PROBES)


@pytest.mark.parametrize("name", [p.name for p in PROBES])
def test_probe(outcomes, name):
    o = outcomes[name]
    if o.probe.known_bug:
        # a bug found and not fixed yet: reported as xfail while it fails, and a failure once
        # it is fixed, so that its known_bug note is removed
        assert not o.passed, f"fixed: drop the probe's known_bug note ({o.probe.known_bug})"
        pytest.xfail(f"known bug: {o.probe.known_bug} (got {o.got}: {o.message[:200]})")
    assert o.got == o.probe.expect, f"{o.probe.code}\n-> {o.got}: {o.message}"
    for s in o.probe.contains:
        assert s in o.message, f"{o.probe.code}\n-> message lacks {s!r}: {o.message}"
