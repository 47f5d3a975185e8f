"""One quota type's limits and every client's measured rate: Kafka's ClientQuotaManager
with its DefaultQuotaCallback. No I/O; times come in as milliseconds.

Which quota a (user, client id) gets, most specific first (Kafka's order):

    1. /config/users/<user>/clients/<client-id>     5. /config/users/<default>/clients/<default>
    2. /config/users/<user>/clients/<default>       6. /config/users/<default>
    3. /config/users/<user>                         7. /config/clients/<client-id>
    4. /config/users/<default>/clients/<client-id>  8. /config/clients/<default>

and whom it is shared with: a quota on a user (or the user default) is one rate for all
that user's clients, one on a client id (or the client default) one rate for that client
id whoever the user, one on a (user, client id) pair (or a default of it) one rate per
pair. Those are the metric tags of Kafka's sensors, ("", client) for example; a sensor
idle for an hour goes, as Kafka's do."""

from __future__ import annotations

from dataclasses import dataclass

from epochlog.quotas.entities import DEFAULT, QuotaEntity
from epochlog.quotas.rate import WindowedRate, throttle_time_ms

Tags = tuple[str, str]  # (user, client id); "" where the quota does not tell them apart

_CLIENT_ID_QUOTAS = 1
_USER_QUOTAS = 2
_USER_CLIENT_ID_QUOTAS = 4
# Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds.
SENSOR_EXPIRY_MS = 3600 * 1000
_SWEEP_EVERY_MS = 60 * 1000
_RESOLVED_MAX = 10_000


@dataclass(slots=True)
class _Sensor:
    rate: WindowedRate
    last_record_ms: int


class ClientQuotaManager:
    """Limits of one quota key by entity, and a windowed rate per sensor."""

    def __init__(
        self, key: str, samples: int, window_seconds: int, max_throttle_ms: int | None = None
    ) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_seconds * 1000
        # Request quotas bound a throttle to one window (ClientRequestQuotaManager).
        self.max_throttle_ms = max_throttle_ms
        self.limits: dict[QuotaEntity, float] = {}
        self._sensors: dict[Tags, _Sensor] = {}
        # (user, client id) -> the sensor's tags and its limit; cleared when limits change.
        self._resolved: dict[Tags, tuple[Tags, float | None]] = {}
        self._last_sweep_ms = 0

    @property
    def enabled(self) -> bool:
        """Whether any quota of this type is set: with none, nothing is measured."""
        return bool(self.limits)

    def set_limit(self, entity: QuotaEntity, limit: float | None) -> None:
        if limit is None:
            self.limits.pop(entity, None)
        else:
            self.limits[entity] = limit
        self._resolved.clear()

    # -- which quota applies (DefaultQuotaCallback) -------------------------------------

    def resolve(self, user: str, client_id: str) -> tuple[Tags, float | None]:
        """The sensor's tags and the limit for a (user, client id) (None: unlimited)."""
        found = self._resolved.get((user, client_id))
        if found is None:
            if len(self._resolved) >= _RESOLVED_MAX:  # many short-lived client ids
                self._resolved.clear()
            tags = self._metric_tags(user, client_id)
            found = self._resolved[(user, client_id)] = (tags, self._limit(tags))
        return found

    def _types(self) -> int:
        types = 0
        for entity in self.limits:
            if entity.user is None:
                types |= _CLIENT_ID_QUOTAS
            elif entity.client_id is None:
                types |= _USER_QUOTAS
            else:
                types |= _USER_CLIENT_ID_QUOTAS
        return types

    def _metric_tags(self, user: str, client_id: str) -> Tags:
        types = self._types()
        if types == _CLIENT_ID_QUOTAS:
            return ("", client_id)
        if types == _USER_QUOTAS:
            return (user, "")
        if types == _USER_CLIENT_ID_QUOTAS:
            return (user, client_id)
        has = self.limits.__contains__
        if has(QuotaEntity(user, client_id)) or has(QuotaEntity(user, DEFAULT)):
            return (user, client_id)
        if has(QuotaEntity(user)):
            return (user, "")
        if has(QuotaEntity(DEFAULT, client_id)) or has(QuotaEntity(DEFAULT, DEFAULT)):
            return (user, client_id)
        if has(QuotaEntity(DEFAULT)):
            return (user, "")
        return ("", client_id)

    def _limit(self, tags: Tags) -> float | None:
        user, client_id = tags
        if user and client_id:
            candidates = [
                QuotaEntity(user, client_id),
                QuotaEntity(user, DEFAULT),
                QuotaEntity(DEFAULT, client_id),
                QuotaEntity(DEFAULT, DEFAULT),
            ]
        elif user:
            candidates = [QuotaEntity(user), QuotaEntity(DEFAULT)]
        elif client_id:
            candidates = [QuotaEntity(client_id=client_id), QuotaEntity(client_id=DEFAULT)]
        else:
            candidates = []
        for entity in candidates:
            if entity in self.limits:
                return self.limits[entity]
        return None

    # -- measuring and throttling -------------------------------------------------------

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Charge ``value`` and return the throttle time in ms (0 within the quota):
        Kafka's recordAndGetThrottleTimeMs. A client no quota applies to is not measured."""
        tags, limit = self.resolve(user, client_id)
        if limit is None:
            return 0
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms)
        measured = sensor.rate.measure(now_ms)
        if measured <= limit:
            return 0
        throttle = throttle_time_ms(measured, limit, sensor.rate.window_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return max(0, throttle)

    def record_unchecked(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Charge ``value`` without judging it (Kafka's recordNoThrottle, and with a
        negative value its unrecordQuotaSensor): the next request is judged with it."""
        tags, limit = self.resolve(user, client_id)
        if limit is not None:
            self._sensor(tags, now_ms).rate.record(value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """The most one request may carry and still not be throttled when nothing else
        was recorded (Kafka caps a consumer's fetch at it)."""
        _, limit = self.resolve(user, client_id)
        if limit is None:
            return float("inf")
        return limit * (self.samples - 1) * self.window_ms / 1000

    def _sensor(self, tags: Tags, now_ms: int) -> _Sensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(
                WindowedRate(self.samples, self.window_ms), now_ms
            )
        sensor.last_record_ms = now_ms
        if now_ms - self._last_sweep_ms >= _SWEEP_EVERY_MS:
            self._last_sweep_ms = now_ms
            for idle in [t for t, s in self._sensors.items() if now_ms - s.last_record_ms
                         >= SENSOR_EXPIRY_MS]:  # fmt: skip
                del self._sensors[idle]
        return sensor
