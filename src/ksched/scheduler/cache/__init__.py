"""ksched.scheduler.cache"""
