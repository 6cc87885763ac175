__author__ = 'tianzhi'
