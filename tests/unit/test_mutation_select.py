"""The mutation runner's test selection (tests/mutation/run.py select): which passing tests run against a mutant,
and in what order."""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.tests.mutation import run
from ansible_collections.gpuprov.cloud.tests.mutation.operators import mutants_of

SOURCE = '''\
import dataclasses


@dataclasses.dataclass
class Record:
    name: str = ""

    def shown(self):
        return self.name.upper()


def describe(record):
    return record.name
'''
PATH = "plugins/module_utils/providers/base.py"


def cover(by_line, others=()):
    """What the coverage pass found: the tests that ran each line of PATH, and ``others``, measured tests that ran
    none of its lines."""
    tests = {t for ts in by_line.values() for t in ts} | set(others)
    return {"lines": {PATH: {str(k): sorted(v) for k, v in by_line.items()}},
            "tests": {t: {"passed": True, "duration": 0.1} for t in tests}}


def mutant(operator, qualname):
    return next(m for m in mutants_of(PATH, SOURCE) if m.operator == operator and m.qualname == qualname)


def test_a_mutant_in_a_function_runs_only_the_tests_that_ran_its_line_own_tests_first():
    changed = mutant("return_none", "describe")
    chosen = run.select(changed, cover({13: ["tests/unit/test_other.py::t1", "tests/unit/test_provider_x.py::t2"],
                                        9: ["tests/unit/test_unrelated.py::t3"]}))
    assert chosen == ["tests/unit/test_provider_x.py::t2", "tests/unit/test_other.py::t1"]


def test_an_import_time_mutant_runs_the_tests_that_read_the_name_and_the_files_own_tests():
    field = mutant("statement", "Record")          # name: str = "" -> pass; read on lines 9 and 13
    assert field.uses == (9, 13)
    chosen = run.select(field, cover({9: ["tests/unit/test_shown.py::t1"], 1: ["tests/unit/test_elsewhere.py::t3"]},
                                     # reads a class attribute only: runs no line of the file
                                     others=["tests/unit/test_provider_records.py::t2", "tests/unit/test_other.py::t5"]))
    assert chosen == ["tests/unit/test_provider_records.py::t2", "tests/unit/test_shown.py::t1"]


def test_an_import_time_mutant_whose_names_no_test_reads_runs_every_test_of_the_file():
    field = mutant("statement", "Record")
    chosen = run.select(field, cover({1: ["tests/unit/test_elsewhere.py::t3"], 6: ["tests/unit/test_x.py::t4"]}))
    assert sorted(chosen) == ["tests/unit/test_elsewhere.py::t3", "tests/unit/test_x.py::t4"]


def test_a_target_without_a_listed_home_has_only_its_own_name_as_prefix():
    assert run.own_test_prefixes("plugins/module_utils/vm/launch.py") == ("test_launch",)
    assert run.own_test_prefixes(PATH) == ("test_base", "test_provider_")
