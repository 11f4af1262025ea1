"""skin"""
