# traintime: predict training time and cost of deep-learning runs on any GPU.
# The configuration is validated once (rules/common.smk); each stage lives in rules/<stage>.smk and
# adds its final products to ALL_TARGETS, which `rule all` builds.

# The embedded default, found next to this file; --configfile adds to / overrides it.
configfile: os.path.join(workflow.basedir, "config.yaml")


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/chronos_iteration.smk"
include: "rules/chronos_convergence.smk"
include: "rules/collect.smk"
include: "rules/convergence_extra.smk"
include: "rules/emulation.smk"
include: "rules/emulation_host.smk"
include: "rules/steptime.smk"
include: "rules/predict.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        ALL_TARGETS,
