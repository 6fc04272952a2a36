"""The mutation runner's operators (tests/mutation/operators.py): what each one makes of a small snippet."""

from __future__ import annotations

import textwrap

import pytest

from ansible_collections.gpuprov.cloud.tests.mutation.operators import mutants_of

SNIPPET = textwrap.dedent('''\
    """A module docstring."""
    import logging

    log = logging.getLogger(__name__)
    LIMIT = 3


    def kind_of(state, retries: int = 2):
        """A docstring."""
        kind = state["kind"]
        if kind in ("Planning", "Ready") and retries > 0:
            log.debug("kind %s", kind)
            return kind
        if retries:
            retries = 0
        while state.get("more"):
            state = step(state, retries, fast=True)
        assert state is not None
        return None
''')
PATH = "plugins/module_utils/example.py"


def changes(source=SNIPPET, operator=None):
    return {(m.operator, m.before, m.after) for m in mutants_of(PATH, source) if operator in (None, m.operator)}


def mutated(before, after, operator, source=SNIPPET):
    [mutant] = [m for m in mutants_of(PATH, source) if (m.operator, m.before, m.after) == (operator, before, after)]
    text = mutant.apply(source)
    assert mutant.check(text)
    return text


@pytest.mark.parametrize("operator, before, after, line", [
    ("compare", "retries > 0", "retries <= 0", 'if kind in ("Planning", "Ready") and (retries <= 0):'),
    ("compare", "kind in ('Planning', 'Ready')", "kind not in ('Planning', 'Ready')",
     "if (kind not in ('Planning', 'Ready')) and retries > 0:"),
    ("negate", "retries", "not retries", "if (not retries):"),
    ("compare", "state is not None", "state is None", "assert (state is None)"),
    ("tuple_element", "kind in ('Planning', 'Ready')", "kind in ('Ready',)", "if kind in ('Ready',) and retries > 0:"),
    ("negate", "state.get('more')", "not state.get('more')", "while (not state.get('more')):"),
    ("boolop", "kind in ('Planning', 'Ready') and retries > 0", "kind in ('Planning', 'Ready') or retries > 0",
     "if (kind in ('Planning', 'Ready') or retries > 0):"),
    ("bool_operand", "kind in ('Planning', 'Ready') and retries > 0", "retries > 0", "if (retries > 0):"),
    ("constant", "retries > 0", "retries > 1", "if kind in (\"Planning\", \"Ready\") and retries > 1:"),
    ("constant", "fast=True", "fast=False", "state = step(state, retries, fast=False)"),
    ("constant", "return None", "return True", "return True"),
    ("statement", "kind = state['kind']", "pass", "pass"),
    ("argument", "step(state, retries, fast=True)", "step(state, retries)", "state = step(state, retries)"),
    ("argument", "step(state, retries, fast=True)", "step(state, fast=True)", "state = step(state, fast=True)"),
    ("return_none", "return kind", "return None", "return None"),
])
def test_each_operator_makes_the_expected_source(operator, before, after, line):
    text = mutated(before, after, operator)
    assert line in [x.strip() for x in text.splitlines()]
    assert len(text.splitlines()) == len(SNIPPET.splitlines())   # the rest of the file is untouched


def test_docstrings_logging_annotations_and_module_statements_are_not_mutated():
    found = changes()
    assert not [c for c in found if "docstring" in c[1] or "log.debug" in c[1] or "getLogger" in c[1]]
    assert not [c for c in found if c[1].startswith("int")]                      # the annotation
    assert ("statement", "LIMIT = 3", "pass") not in found                      # module level: import time
    assert ("constant", "LIMIT = 3", "LIMIT = 4") in found                       # its constant still is
    assert ("constant", "2", "3") in found                                       # so is a default argument's
    assert not [c for c in found if c[0] == "argument" and "getLogger" in c[1]]


def test_one_mutant_per_site_and_no_negation_that_repeats_a_compare_flip():
    found = changes(operator="negate")
    assert ("negate", "state.get('more')", "not state.get('more')") in found
    assert not [c for c in found if c[1] == "retries > 0"]   # an `if` on a compare: the compare flip is its negation
    assert ("negate", "kind in ('Planning', 'Ready') and retries > 0",
            "not (kind in ('Planning', 'Ready') and retries > 0)") in found
    ids = [m.id for m in mutants_of(PATH, SNIPPET)]
    assert len(ids) == len(set(ids))


def test_ids_survive_an_inserted_blank_line_and_lines_follow():
    before = mutants_of(PATH, SNIPPET)
    shifted = SNIPPET.replace("def kind_of", "\n\ndef kind_of")
    after = mutants_of(PATH, shifted)
    assert [m.id for m in before] == [m.id for m in after]
    assert [m.lineno + 2 for m in before if m.in_function] == [m.lineno for m in after if m.in_function]


def test_identical_changes_in_one_function_get_distinct_ids():
    source = "def f(a):\n    g(a, 1)\n    g(a, 1)\n"
    ids = [m.id for m in mutants_of(PATH, source) if m.operator == "constant"]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_a_multi_line_call_and_non_ascii_text_splice_cleanly():
    source = 'def f(a):\n    x = "é"\n    return g(a,\n             b=2)  # a comment\n'
    text = mutated("g(a, b=2)", "g(a)", "argument", source)
    assert text == 'def f(a):\n    x = "é"\n    return g(a)  # a comment\n'
