"""The client quota settings of a broker (Kafka's QuotaConfig; the quotas themselves live
in the metastore, set through AlterClientQuotas or ``epochlog quotas``)."""

from __future__ import annotations

from epochlog.settings.registry import Setting, integer

QUOTAS = "Client quotas"

QUOTA_SETTINGS = [
    Setting(
        "quota.window.num",
        integer(1, long=False),
        11,
        "The number of samples to retain in memory for client quotas.",
        QUOTAS,
    ),
    Setting(
        "quota.window.size.seconds",
        integer(1, long=False),
        1,
        "The time span of each sample for client quotas.",
        QUOTAS,
    ),
]
