"""Placeholder: replaced below by the real facade."""
from c3.services_fake import FakeServices

def build_services(readonly: bool = False, demo: bool = False):
    return FakeServices("placed", readonly=readonly, boot_step_s=0.5)
