"""runtime/contact"""
