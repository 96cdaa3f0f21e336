"""Results out: plain records, the SQLite results database, summaries and offline HTML reports."""
