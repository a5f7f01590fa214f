"""Running recipes across nodes: plan (exact commands per node), launch with rollback, control
(stop/status/logs), the watchdog and the systemd units that run them."""
