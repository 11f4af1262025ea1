"""material"""
