"""Modal screens: confirm gate, new pod, help, logs, details."""
