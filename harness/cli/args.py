"""What the command modules share: the parser whose errors are one line, the argument
types (any unit parser made one, bounded integers, positive numbers, probabilities), and a
campaign's arguments (its name, ``--configfile``) and loading."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from ..campaign import config


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse whose errors are one line: ``harness run: error: argument --size: …``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def typed(parse, what):
    """An argument type of ``parse`` (e.g. ``units.parse_size``): its ValueError becomes
    argparse's error; ``what`` names the type in argparse's messages."""
    def conv(text):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    conv.__name__ = what
    return conv


def cells_or_share(text):
    """An argument type: a count of cells (an integer >= 1) or a share such as ``25%``."""
    text = str(text).strip()
    if text.endswith("%"):
        try:
            share = float(text[:-1])
        except ValueError:
            share = 0.0
        if 0 < share <= 100:
            return text
    else:
        try:
            if int(text) >= 1:
                return int(text)
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"expected a number of cells (an integer >= 1) or a share "
                                     f"of each library's cells such as 25%, got {text!r}")


def int_at_least(low):
    """An argument type: an integer not below ``low``."""
    def conv(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
        return value
    return conv


def positive_float(text):
    """An argument type: a number greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def probability(text):
    """An argument type: a number between 0 and 1, both excluded."""
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def load_campaign(configfile, name: str, parser, arg: str):
    """The ``harness.campaign.workflow.Campaign`` of ``configfile`` (default config/experiments.yaml),
    which must define campaign ``name``; else a one-line error naming ``arg``."""
    from ..campaign.workflow import Campaign  # pandas, which `harness exec` does without

    path = Path(configfile or config.DEFAULT_CONFIG)
    try:
        with open(path) as fh:
            campaign = Campaign(yaml.safe_load(fh), source=str(path))
    except (OSError, yaml.YAMLError, config.ConfigError) as exc:
        parser.error(f"argument --configfile: {path}: {getattr(exc, 'strerror', None) or exc}")
    if campaign.cfg.campaign != name:
        parser.error(f"argument {arg}: {path} defines campaign {campaign.cfg.campaign!r}, "
                     f"not {name!r} (--configfile)")
    return campaign


def campaign_args(p, config_help: str) -> None:
    """Add a campaign's name (positional) and ``--configfile`` to the parser ``p``."""
    p.add_argument("campaign", help="campaign name (results/<campaign>/)")
    p.add_argument("--configfile", default=None, help=config_help)
