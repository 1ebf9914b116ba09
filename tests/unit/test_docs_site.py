"""The documentation site builds as `make docs` builds it: `mkdocs build --strict`, so a broken link or anchor, a
page missing from the nav or a missing snippet (CONTRIBUTING.md, bench/README.md) fails here and in CI. The
README, which GitHub shows outside the site, links only to files that exist."""

import os
import re
import subprocess
import sys
from pathlib import Path

from paths import REPO_ROOT

# [text](target) outside code: the README's relative links and images.
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_the_site_builds_strict_without_warnings(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        # Material's notice about MkDocs 2 is advice to the maintainers, not a finding about the docs.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "contributing" / "index.html").is_file()


def test_the_readme_links_only_to_files_that_exist() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    outside_code = re.sub(r"```.*?```", "", readme, flags=re.DOTALL)
    targets = [target for target in MARKDOWN_LINK.findall(outside_code) if "://" not in target]
    assert targets, "the README links into docs/"
    missing = [target for target in targets if not (REPO_ROOT / target.split("#")[0]).exists()]
    assert missing == [], f"README links to missing files: {missing}"
