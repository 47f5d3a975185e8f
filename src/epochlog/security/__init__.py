"""Who may connect and how: listeners, TLS, principals."""
