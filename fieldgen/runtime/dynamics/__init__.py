"""runtime/dynamics"""
