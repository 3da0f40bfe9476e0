"""Leaderboards from the results store: tables (pandas), plots (matplotlib), Markdown and HTML."""
