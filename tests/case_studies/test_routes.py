"""The malware-like study's routes (case_studies/routes.py): the commands a
user types, and the claims RESULTS.md draws from the rounds' savings,
computed here from made-up rounds with the test's own arithmetic. The runs
themselves take minutes (`python -m case_studies --scale small --study
malware`); the mechanics of `run --staged` are tests/advice/test_staged*.py's."""
from case_studies import results as R
from case_studies import routes


def rounds_of(savings, before=10.0):
    """Rounds whose served and edited runs saved the given seconds."""
    out = []
    for served, edited in savings:
        row = {"order": list(routes.ROUTES)}
        for r in routes.ROUTES:
            row[r] = {"load_before": 1.0, "load_after": 2.0, "others_cores": 0.5}
        for r, saved in (("served", served), ("edited", edited)):
            row[r].update(job={"before": before, "after": before - saved, "achieved": saved},
                          served={"opens": 7 if r == "served" else 0, "bytes": 7 << 20 if r == "served" else 0},
                          sources_read=0)
        row["unstaged"]["job"] = {"job_time": before}
        out.append(row)
    return out


def test_the_served_route_is_the_unstaged_command_with_staged_and_the_script_unchanged():
    base = routes.command("unstaged", "L", "M.json", "D", 16, 8)
    served = routes.command("served", "L", "M.json", "D", 16, 8)
    edited = routes.command("edited", "L", "M.json", "D", 16, 8)
    assert served == base[:3] + ["--staged", "M.json"] + base[3:]
    assert edited == base + ["--staged-paths"]
    assert routes.environment("/x/staged.json").get("TFDARSHAN_STAGED") is None


def render(savings):
    ro = {"rounds": rounds_of(savings), "commands": {r: r for r in routes.ROUTES}}
    ro["summary"] = routes.summarize(ro["rounds"])
    text = "\n".join(R._routes({"routes": ro, "staging": {"recommended": {"files": 7, "bytes": 7 << 20}}}))
    return ro["summary"], text


def test_savings_are_compared_within_each_round():
    savings = [(1.0, 2.0), (3.0, 2.0), (2.0, 2.0), (1.5, 1.0), (2.2, 2.0)]
    sm, text = render(savings)
    ratios = sorted(s / e for s, e in savings)
    assert sm["served_over_edited"]["median"] == ratios[2]
    assert (sm["served_over_edited"]["lo"], sm["served_over_edited"]["hi"]) == (ratios[0], ratios[-1])
    assert sm["served"]["saved_share"]["median"] == sorted(s for s, _ in savings)[2] / 10.0
    assert "within noise" in text and "the interval contains 1" in text


def test_a_route_that_saves_less_in_every_round_is_said_to():
    sm, text = render([(1.0, 2.0), (1.1, 2.0), (0.9, 1.5), (1.2, 1.9), (1.0, 2.2)])
    assert sm["served_minus_edited"]["hi"] < 0
    assert "saves less than the edited script in every round" in text


def test_too_few_rounds_make_no_claim():
    _, text = render([(1.0, 2.0), (1.1, 2.0)])
    assert "too few to compare" in text and "every round" not in text


def test_a_saving_that_reaches_zero_shows_nothing_about_the_ratio():
    sm, text = render([(1.0, 2.0), (-0.5, 1.0), (2.0, 1.5), (1.5, -1.0), (2.2, 2.0)])
    assert sm["served"]["saved"]["lo"] < 0 < sm["served"]["saved"]["hi"]
    assert "not shown" in text and "within noise" not in text
