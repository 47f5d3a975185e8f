"""Who may connect and how: listeners, TLS, principals (issue 12)."""
