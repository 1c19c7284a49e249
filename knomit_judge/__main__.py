"""`python -m knomit_judge`: the console script's own entry point, so both behave alike."""

from .cli import main

if __name__ == "__main__":
    main()
