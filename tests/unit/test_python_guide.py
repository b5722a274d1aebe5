"""The guide page "Use reprsim from Python" (docs/python.md) runs as written: its Python blocks, in order and in
one namespace, print exactly the text block that follows each. After an intended change, rewrite the page's
outputs with REPRSIM_REGENERATE_GUIDE=1."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"
BLOCK = re.compile(r"```(python|text)\n(.*?)```", re.S)


def examples(text: str) -> list[tuple[str, str | None, re.Match | None]]:
    """(code, printed output the page shows or None, the output block's match) for each Python block."""
    blocks = list(BLOCK.finditer(text))
    out = []
    for i, block in enumerate(blocks):
        if block.group(1) != "python":
            continue
        following = blocks[i + 1] if i + 1 < len(blocks) and blocks[i + 1].group(1) == "text" else None
        out.append((block.group(2), None if following is None else following.group(2), following))
    return out


def run(code_blocks: list[str]) -> list[str]:
    namespace: dict = {"__name__": "guide"}
    printed = []
    for code in code_blocks:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(code, str(PAGE), "exec"), namespace)
        printed.append(buffer.getvalue())
    return printed


def test_the_python_page_prints_what_it_shows():
    text = PAGE.read_text()
    found = examples(text)
    assert len(found) >= 6, "the page lost its examples"
    printed = run([code for code, _, _ in found])
    if os.environ.get("REPRSIM_REGENERATE_GUIDE"):
        for (_, _, block), output in sorted(zip(found, printed), key=lambda item: -item[0][2].start()):
            text = text[:block.start(2)] + output + text[block.end(2):]
        PAGE.write_text(text)
        return
    for (code, shown, _), output in zip(found, printed):
        assert shown is not None, f"a Python block prints nothing the page shows:\n{code}"
        assert output == shown, f"the page shows\n{shown}\nbut the code prints\n{output}\nfor\n{code}"


def test_the_readme_s_array_call_prints_what_it_shows():
    """README, "The first five minutes": the `python -c` call and the table printed under it."""
    readme = (PAGE.parents[1] / "README.md").read_text()
    call = re.search(r'```bash\n\.venv/bin/python -c "\n(.*?)"\n```\n\n```text\n(.*?)```', readme, re.S)
    assert call, "README lost its array call"
    assert run([call.group(1)]) == [call.group(2)]
