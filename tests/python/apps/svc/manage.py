#!/usr/bin/env python3
"""Django's manage.py for the test project (runserver with its reloader in the test)."""
import os
import sys

if __name__ == '__main__':
    os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'djproj.settings')
    from django.core.management import execute_from_command_line
    execute_from_command_line(sys.argv)
