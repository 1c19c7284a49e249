"""One review session: its typed context at the bottom (context.py), the spine on top (review.py).

Nothing is re-exported here, so importing one of its lower modules (lines.py, for recovery) never imports the
spine; the package's face (knomit_judge/__init__.py) exports review, ReviewOptions and SessionResult.
"""
