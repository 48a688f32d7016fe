"""What an operator runs the service with: metrics and backups."""
