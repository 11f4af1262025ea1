"""runtime/scene"""
