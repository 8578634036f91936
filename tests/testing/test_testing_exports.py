import trio_agent.testing


def test_testing_all_is_sorted_and_complete() -> None:
    names = trio_agent.testing.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(trio_agent.testing, name), name
    public = {
        name
        for name in dir(trio_agent.testing)
        if not name.startswith("_")
        and getattr(trio_agent.testing, name).__class__.__name__ != "module"
    }
    assert public - set(names) == set()
