from django.http import HttpResponse
from django.urls import path

import work


def slow(request):
    return HttpResponse(work.slow())


urlpatterns = [path('slow', slow)]
