"""ksched.scheduler.queue"""
