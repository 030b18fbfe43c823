"""Connection security of the broker, in Kafka's own configuration terms: listeners, TLS and SASL."""


class SecurityConfigError(ValueError):
    """A listener, TLS or SASL setting that cannot be right; ``key`` is the setting to name in the error."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
