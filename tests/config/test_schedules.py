"""Warm capacity's schedules and the config's time zone: the syntax, every edge to the second, the errors."""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from config.load import load_config
from config.located import ConfigError
from config.schedule import parse_schedule
from policy.settings import plan_settings

PARIS = ZoneInfo("Europe/Paris")


def at(*when: int, tz=PARIS) -> float:
    return datetime(*when, tzinfo=tz).timestamp()


def test_a_window_opens_on_its_first_second_and_closes_on_its_last_on_its_days_only():
    s = parse_schedule("08:00-20:00 Mon-Fri")
    assert not s.open_at(at(2024, 5, 6, 7, 59, 59), PARIS), "Monday 07:59:59"
    assert s.open_at(at(2024, 5, 6, 8, 0, 0), PARIS), "Monday 08:00:00"
    assert s.open_at(at(2024, 5, 10, 19, 59, 59), PARIS), "Friday 19:59:59"
    assert not s.open_at(at(2024, 5, 10, 20, 0, 0), PARIS), "Friday 20:00:00"
    assert not s.open_at(at(2024, 5, 11, 12, 0), PARIS), "Saturday noon: a day outside"
    assert not s.open_at(at(2024, 5, 6, 9, 0), ZoneInfo("UTC")), "09:00 in Paris is 07:00 UTC"


def test_a_window_ending_before_it_starts_runs_past_midnight_from_its_days():
    s = parse_schedule("22:00-06:00 Fri")
    assert not s.open_at(at(2024, 5, 10, 21, 59), PARIS)
    assert s.open_at(at(2024, 5, 10, 22, 0), PARIS), "Friday 22:00"
    assert s.open_at(at(2024, 5, 11, 5, 59, 59), PARIS), "Saturday 05:59:59"
    assert not s.open_at(at(2024, 5, 11, 6, 0), PARIS), "Saturday 06:00"
    assert not s.open_at(at(2024, 5, 11, 23, 0), PARIS), "not Saturday night"
    assert not s.open_at(at(2024, 5, 10, 3, 0), PARIS), "not the night into Friday"


def test_days_are_ranges_lists_or_every_day_and_a_range_may_wrap_the_week():
    assert parse_schedule("09:00-17:00").windows[0].days == frozenset(range(7))
    assert parse_schedule("09:00-17:00 Sat,Sun").windows[0].days == {5, 6}
    assert parse_schedule("09:00-17:00 fri-mon").windows[0].days == {4, 5, 6, 0}
    assert parse_schedule("09:00-17:00 Mon,Wed-Fri").windows[0].days == {0, 2, 3, 4}
    whole = parse_schedule(["00:00-24:00 Sat", "08:00-12:00 Mon"])
    assert whole.open_at(at(2024, 5, 11, 23, 59, 59), PARIS) and not whole.open_at(at(2024, 5, 12, 0, 0), PARIS)
    assert str(whole) == "00:00-24:00 Sat, 08:00-12:00 Mon"


def test_the_next_edge_is_the_next_opening_or_closing_to_the_second():
    s = parse_schedule("08:00-20:00 Mon-Fri")
    assert s.next_edge(at(2024, 5, 6, 7, 59, 59), PARIS) == at(2024, 5, 6, 8, 0)
    assert s.next_edge(at(2024, 5, 6, 8, 0), PARIS) == at(2024, 5, 6, 20, 0)
    assert s.next_edge(at(2024, 5, 10, 20, 0), PARIS) == at(2024, 5, 13, 8, 0), "over the weekend"


def test_clocks_moving_for_daylight_saving_move_the_window_with_them():
    s = parse_schedule("08:00-20:00")
    # The last Sunday of March: 08:00 is 06:00 UTC, not 07:00 UTC as the day before.
    assert s.next_edge(at(2024, 3, 31, 1, 0), PARIS) == datetime(2024, 3, 31, 6, 0, tzinfo=ZoneInfo("UTC")).timestamp()
    # A window opening at 02:30 that day, a time the clocks skip, opens when they jump (03:00, 01:00 UTC); the
    # edges given are never later than the change.
    gap = parse_schedule("02:30-05:00")
    jump = datetime(2024, 3, 31, 1, 0, tzinfo=ZoneInfo("UTC")).timestamp()
    assert not gap.open_at(jump - 1, PARIS) and gap.open_at(jump, PARIS)
    t = at(2024, 3, 31, 0, 0)
    while t < jump - 0.01:
        t = gap.next_edge(t, PARIS)
    assert t == pytest.approx(jump, abs=0.01)


@pytest.mark.parametrize("text, message", [
    ("8-20 Mon-Fri", "not a schedule window: '8-20 Mon-Fri' (HH:MM-HH:MM, then the days, e.g. 08:00-20:00 Mon-Fri)"),
    ("08:00-20:00 Mon-Fry", "not a day: 'Fry' in '08:00-20:00 Mon-Fry' (days are Mon, Tue, Wed, Thu, Fri, Sat, Sun,"
                            " or ranges and lists of them such as Mon-Fri or Sat,Sun)"),
    ("08:00-25:00", "not a time of day: 25:00 in '08:00-25:00' (an end must be 00:00 to 24:00)"),
    ("08:60-20:00", "not a time of day: 08:60 in '08:60-20:00' (a start must be 00:00 to 24:00)"),
    ("24:00-06:00", "a window cannot start at 24:00: '24:00-06:00' (write 00:00 of the next day)"),
    ("08:00-08:00 Mon", "an empty window: '08:00-08:00 Mon' (it starts when it ends)"),
])
def test_a_schedule_that_does_not_parse_says_what_is_wrong(text, message):
    with pytest.raises(ValueError) as info:
        parse_schedule(text)
    assert str(info.value) == message


CONFIG = """
instance: {id: a, serves: [aws, lic], planner: true}
controller: {url: "sqlite:///var/lib/provisioner/state.db"}
policy:
  timezone: %(tz)s
  min_idle: 2
  warm_schedule: "%(global)s"
providers:
  - name: aws
    kind: hosts
    script: {style: v2, path: /usr/local/bin/provisioner-ec2}
    policy:
      warm:
        - {template: m5.large, min_idle: 1, min_hosts: 2}
        - {min_hosts: 1, schedule: ["%(window)s", "08:00-12:00 Sat"]}
  - name: lic
    kind: units
    script: {style: v2, path: /usr/local/bin/provisioner-flexlm}
    policy:
      warm: %(units)s
"""


def write(tmp_path: Path, **over: str) -> Path:
    values = {"tz": "Europe/Paris", "global": "08:00-20:00 Mon-Fri", "window": "07:00-19:00 Mon-Fri",
              "units": "[]", **over}
    path = tmp_path / "prov.yaml"
    path.write_text(textwrap.dedent(CONFIG % values).lstrip("\n"))
    return path


def test_check_config_names_the_line_and_place_of_each_bad_schedule_time_zone_or_warm_rule(tmp_path: Path):
    path = write(tmp_path, tz="Europe/Pariss", window="7-19 Mon-Fri")
    with pytest.raises(ConfigError) as info:
        load_config(path, check_files=False)
    assert [str(i) for i in info.value.issues] == [
        f"{path}:4: policy.timezone: unknown time zone 'Europe/Pariss' (an IANA name such as UTC, Europe/Paris or "
        "America/New_York)",
        f"{path}:14: providers[0].policy.warm[1].schedule: not a schedule window: '7-19 Mon-Fri' (HH:MM-HH:MM, "
        "then the days, e.g. 08:00-20:00 Mon-Fri)",
    ]
    path = write(tmp_path, units="[{min_hosts: 1}]")
    with pytest.raises(ConfigError) as info:
        load_config(path, check_files=False)
    assert [str(i) for i in info.value.issues] == [
        f"{path}:19: providers[1].policy.warm: warm capacity keeps hosts: a units provider has none to keep"]


def test_a_good_config_gives_the_planner_its_rules_in_the_config_time_zone(tmp_path: Path):
    cfg = load_config(write(tmp_path), check_files=False)
    warm = plan_settings(cfg.policy, cfg.budget, cfg.providers).warm
    assert warm.tz == PARIS
    assert [(r.provider, r.template, r.min_idle, r.min_hosts, str(r.schedule) if r.schedule else None)
            for r in warm.rules] == [
        (None, None, 2, 0, "08:00-20:00 Mon-Fri"),
        ("aws", "m5.large", 1, 2, None),
        ("aws", None, 0, 1, "07:00-19:00 Mon-Fri, 08:00-12:00 Sat"),
    ]
    utc = load_config(write(tmp_path, tz="UTC"), check_files=False)
    assert plan_settings(utc.policy).warm.tz.utcoffset(None).total_seconds() == 0
