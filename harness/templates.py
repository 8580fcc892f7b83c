"""Job scripts rendered from the Jinja templates in ``slurm_templates/``.

``StrictUndefined``: a missing value is an error, never an empty string. Every value that
reaches the shell goes through the ``shq`` filter (``shlex.quote``); the only raw lines are
a site's ``setup`` lines (``module load …``), which are shell by definition.
"""

from __future__ import annotations

import re
import shlex

import jinja2

from . import paths

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _env_name(name: str) -> str:
    if not _ENV_NAME.match(str(name)):
        raise ValueError(f"{name!r} is not a valid environment variable name")
    return str(name)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(paths.TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shq"] = lambda v: shlex.quote(str(v))
    env.filters["envname"] = _env_name
    return env


def render(template: str, **values) -> str:
    return environment().get_template(template).render(**values)
