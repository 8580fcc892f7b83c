# The allreduce campaign: config/experiments.yaml -> job scripts -> runs -> summary -> report.
#   snakemake                   the default campaign on this machine (profiles/default)
#   snakemake --profile slurm   the same on a Slurm cluster (profiles/slurm)
# Each stage is one file under workflow/rules/; this file only wires them.
from snakemake.exceptions import WorkflowError

from harness.campaign.config import ConfigError
from harness.campaign.workflow import Campaign
from harness.report.registry import REPORTS, Facts, serial_import

# `--configfile mine.yaml` runs that file alone: Snakemake would otherwise merge it into the
# default config key by key (the default's experiments would run too)
if not workflow.overwrite_configfiles:
    configfile: "config/experiments.yaml"

try:
    CAMPAIGN = Campaign(config, source="config")
except ConfigError as exc:
    raise WorkflowError(f"invalid config: {exc}") from None
if CAMPAIGN.cfg.tune.get("mode") == "adaptive":
    raise WorkflowError(f"tune.mode is adaptive: run `harness tune adaptive "
                        f"{CAMPAIGN.cfg.campaign} --configfile <this config>`, which measures "
                        f"the cells in rounds (docs/tuning.md), or set tune.mode: exhaustive")

RES = str(CAMPAIGN.store.dir)
FIG = str(CAMPAIGN.figures)
# what decides which reports the campaign gets and what they write (harness/report/registry.py)
FACTS = Facts.of(CAMPAIGN.runs.values(), confirm_groups=CAMPAIGN.confirm_groups(),
                 auto_ran=bool(CAMPAIGN.auto_ran_groups()),
                 tune_libraries=CAMPAIGN.tune_libraries(),
                 sgd_experiments=sorted(CAMPAIGN.cfg.sgd or {}))

wildcard_constraints:
    run="r[0-9a-f]{12}",
    group="[A-Za-z0-9_.-]+",
    library="[a-z0-9_]+"

include: "workflow/rules/preflight.smk"
include: "workflow/rules/jobscripts.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/auto_ran.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/params.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/confirm.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/page.smk"
include: "workflow/rules/sgd.smk"

rule all:
    default_target: True
    input:
        REPORT_OUTPUTS,  # workflow/rules/page.smk
        RES + "/report/index.html",
        SGD_OUTPUTS,


# Snakemake's job rate limiter (profiles/default: max-jobs-per-timespan) re-arms a timer of
# that timespan at every scheduling step, in threads the interpreter waits for at exit: each
# run of the workflow ended up to 10 s after its last job. Once the workflow is over they
# have nothing left to schedule.
def _cancel_scheduling_timers():
    import threading

    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()


onsuccess:
    _cancel_scheduling_timers()
    CAMPAIGN.say_outcome()  # the last line: cells failed, timeout or wrong (harness/results/outcome.py)

onerror:
    _cancel_scheduling_timers()
