"""ksched.scheduler.framework"""
