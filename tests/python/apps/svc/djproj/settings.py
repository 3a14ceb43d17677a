"""Minimal settings: no database, no apps; one view."""
SECRET_KEY = 'skyprof-test-only'
DEBUG = False
ALLOWED_HOSTS = ['*']
ROOT_URLCONF = 'djproj.urls'
INSTALLED_APPS = []
MIDDLEWARE = []
DATABASES = {}
USE_TZ = True
