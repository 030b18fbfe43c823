"""Connection security of the broker, in Kafka's own configuration terms: listeners, TLS and SASL."""

# What the sample configs hold where a secret or a password goes. It is refused wherever it is found, so that
# a sample started unchanged fails with directions instead of running with a password everyone can read.
PLACEHOLDER = "CHANGE-ME"


def is_placeholder(value: str) -> bool:
    return value.strip().upper().startswith(PLACEHOLDER)


class SecurityConfigError(ValueError):
    """A listener, TLS or SASL setting that cannot be right; ``key`` is the setting to name in the error."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
