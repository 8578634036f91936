import trio_agent


def test_all_is_sorted_and_complete():
    assert trio_agent.__all__ == sorted(trio_agent.__all__)
    for name in trio_agent.__all__:
        assert hasattr(trio_agent, name), name
    public = {
        name
        for name in dir(trio_agent)
        if not name.startswith("_") and getattr(trio_agent, name).__class__.__name__ != "module"
    }
    assert public - set(trio_agent.__all__) == set()
