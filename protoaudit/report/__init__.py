"""Formatting of audits: text, markdown, json, csv and Caffe's own log lines. No arithmetic here."""
