"""SKILL.md as the agent CLIs discover it: a one-file skill gets the env's front matter, a
package keeps its own (the name and description the CLI lists are the package's)."""

from __future__ import annotations

from skills_ref.parser import parse_frontmatter

from skillopt.agents.exec_cli import render_skill_md


def test_a_one_file_skill_gets_the_envs_front_matter_title_and_preamble() -> None:
    text = render_skill_md(
        "- rule 1\n", description='Solve "sheets"', title="Sheet skill", preamble="Answer in A1."
    )
    fields, body = parse_frontmatter(text)
    assert fields == {"name": "skillopt-target", "description": "Solve 'sheets'"}
    assert body.startswith("# Sheet skill\n\nAnswer in A1.\n\n## Dynamic Guidance\n\n- rule 1")


def test_a_package_keeps_its_own_front_matter_once() -> None:
    skill = "---\nname: qa-helper\ndescription: Answers trivia.\nlicense: MIT\n---\n\n# Rules\n- rule 1\n"
    text = render_skill_md(skill, description="env description", title="QA skill", name="qa-helper")
    fields, body = parse_frontmatter(text)
    assert fields == {"name": "qa-helper", "description": "Answers trivia.", "license": "MIT"}
    assert text.count("---\n") == 2 and "env description" not in text
    assert body.startswith("# QA skill\n\n# Rules\n- rule 1")


def test_an_empty_body_gets_the_placeholder_sentence_in_a_package_too() -> None:
    text = render_skill_md("---\nname: a\ndescription: b\n---\n", description="d", title="T", name="a")
    assert parse_frontmatter(text)[1] == "# T\n\nNo rules learned yet: follow the task description carefully."
